"""The checkout's side of keras_tse: the paper's two recipes (`cifar10_vit.py`, `wikitext103_txl.py`) and the
lab (`recipes/lab/`), which the installed wheel does not hold."""
