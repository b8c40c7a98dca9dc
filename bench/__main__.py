"""``python -m bench``: run jobrelay's benchmarks (``python -m bench fairshare``: fair share)."""

import sys

if sys.argv[1:2] == ["fairshare"]:  # its own fleet shape and flags: a command of its own
    from bench.fair_share import main

    main(args=sys.argv[2:], prog_name="python -m bench fairshare")
else:
    from bench.cli import main

    main()
