"""What compiled files hold, read within bounds: ELF files (`elf`, each read once per run through
`filecache`), their `.nv_fatbin` containers (`fatbin`) grouped into kernel images (`images`),
the CUDA libraries they need by soname (`cudalibs`), and what a link to torch looks like
(`torchabi`). Knows nothing of where a file came
from: an installed environment and a published wheel are both read with it.
"""
