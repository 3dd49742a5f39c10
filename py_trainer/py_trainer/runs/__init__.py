"""A run's life: the registry and queue (`registry`), the run folder and its events log, artifacts
and checkpoint markers, how a worker is launched (`launch`) and by which executor (local, the fork
server, Ray, nodes), the slots it runs in, and the runs root's lock.
"""
