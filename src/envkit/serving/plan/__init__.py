"""What a model needs on a GPU before it starts: its shapes (`shapes`), vision and audio towers
(`towers`), the images vLLM's profiling run batches (`mmbudget`), the memory plan
(`memory_plan`) and the plan `plan` prints and `serve` starts with (`planning`).
"""
