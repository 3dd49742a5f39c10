"""The ground floor: nothing here loads a model or starts a process.

Status errors, atomic writes, root-confined paths, this machine's devices, the knob tables
(`config`), what a model folder holds (`model_files`), the rewards and their registry, group
advantages, the statistics (`stats/`, the port of ts_agent/src/agent/core/stats/) and the code
revision.
"""
