"""The zoo's model families, one module each (its builder under `registry.register_family`, its presets in
it or beside it as `<family>_presets.py`): `keras_tse.zoo.registry.FAMILIES` imports every module here the
first time a family is asked for, so a new family is one file here and its card in `zoo/`."""
