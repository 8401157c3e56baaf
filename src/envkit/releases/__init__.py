"""What each published release holds: vLLM's model registry and transformers' model types, vLLM's
test-registry bounds, and every CUDA build of torch.
"""
