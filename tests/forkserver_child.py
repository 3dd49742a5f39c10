"""A module the fork server tests fork (`python -m forkserver_child MODE ...`): it reports what a
forked worker sees, or exits the way MODE says."""

import json
import os
import signal
import sys
import time

mode = sys.argv[1]
if mode == "report":
    torch = sys.modules.get("torch")
    print(json.dumps({"argv": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd(), "name": __name__,
                      "threads": torch.get_num_threads() if torch is not None else None,
                      "sigusr1_ignored": signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN}), flush=True)
    print("to stderr", file=sys.stderr, flush=True)
elif mode == "exit":
    sys.exit(int(sys.argv[2]))
elif mode == "raise":
    raise ValueError("boom from the child")
elif mode == "sleep":
    print("sleeping", flush=True)
    time.sleep(120)
elif mode == "echo":
    for line in sys.stdin:
        sys.stdout.write(line.upper())
        sys.stdout.flush()
