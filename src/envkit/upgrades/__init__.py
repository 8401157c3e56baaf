"""``envkit upgrade``: moving a profile to another vLLM release (the newest that keeps every
model, GPU and the driver, or the one asked), the side-by-side of what it keeps, loses and
gains (with the evidence of each row), and the rewrite, relock and publish of ``--write``.
It sits above ``serving`` (its lint) and ``lock`` (the locker), which it uses."""
