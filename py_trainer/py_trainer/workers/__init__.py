"""What runs in a worker process: the training worker's entry (`train_worker`, dispatching on
mode), the inference worker and the jobs it runs (`evaluate`, `sampling`, `export_check`,
`memory_estimate`), and a Ray task's bridge (`ray_bridge`).
"""
