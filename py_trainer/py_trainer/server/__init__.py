"""The entry points: the `py-trainer` CLI (`cli`), the gRPC servicer (`servicer`: translates
only), one run without a server (`standalone`), and what every request means before anything is
queued (`validate`, `wire`).
"""
