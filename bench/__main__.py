"""``python -m bench``: run jobrelay's benchmarks (``python -m bench fairshare``: fair share;
``python -m bench estimate``: the estimated start replayed over a synthetic trace, pure;
``python -m bench peer``: the floor against jobrelay in one run)."""

import sys

if sys.argv[1:2] == ["fairshare"]:  # its own fleet shape and flags: a command of its own
    from bench.fair_share import main

    main(args=sys.argv[2:], prog_name="python -m bench fairshare")
elif sys.argv[1:2] == ["estimate"]:  # pure: no fleet
    from bench.start_estimate_replay import main as estimate_main

    estimate_main(args=sys.argv[2:], prog_name="python -m bench estimate")
elif sys.argv[1:2] == ["peer"]:  # its own flags: floor and jobrelay, one run each
    from bench.peer import main as peer_main

    peer_main(args=sys.argv[2:], prog_name="python -m bench peer")
else:
    from bench.cli import main

    main()
