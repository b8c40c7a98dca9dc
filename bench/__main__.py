"""``python -m bench``: run jobrelay's benchmarks."""

from bench.cli import main

main()
