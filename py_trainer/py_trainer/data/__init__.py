"""What a request's files hold: task rows and ranked groups read from JSONL with line-numbered
errors (`request_data`), the task format shared with the agent (`task_file`), the ranked-group
format and its cleaner (`preference_data`), and annotation checks (`annotation`).
"""
