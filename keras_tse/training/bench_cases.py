"""What `keras-tse bench` can time, apart from the bench itself so that its command line parses without
Keras (the bench imports Keras; the command imports the bench only to run it)."""

VIT_CASES = ("vit_post", "vit_pre", "vit_deescalate", "peer_post", "peer_pre")
TIMM_CASES = ("timm_post", "timm_pre")  # timm_peer's; kept here so bench never imports it
TORCH_CASES = ("torch_post", "torch_pre")  # torch.nn.TransformerEncoderLayer's ViT (timm_peer)
PLAIN_TORCH_CASES = TIMM_CASES + TORCH_CASES
TXL_CASES = ("txl_post", "txl_pre", "txl_deescalate")
CASES = VIT_CASES + PLAIN_TORCH_CASES + TXL_CASES
PEERS = {"keras_hub": ("peer_post", "peer_pre"), "timm": TIMM_CASES, "torch": TORCH_CASES}
DTYPES = ("float32", "mixed_bfloat16", "mixed_float16")
