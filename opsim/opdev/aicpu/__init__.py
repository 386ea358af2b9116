"""AI CPU task machinery (opdev/aicpu): the task key, tasks, task spaces and their launchers."""
