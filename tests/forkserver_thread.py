"""Imported by a fork server in test_forkserver.py: a module that starts a thread at import, after
which forking is not safe."""

import threading
import time

threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
