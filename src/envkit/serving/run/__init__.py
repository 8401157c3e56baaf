"""Running vLLM: what `serve` starts and checks first (`launch`), the watched run (`serve`),
probing a server (`probe`) and the compose service (`compose`).
"""
