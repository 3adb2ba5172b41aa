-- The schedule whose fire started a task: its back failures follow the schedule's retry policy.
ALTER TABLE tasks ADD COLUMN schedule_id INTEGER;
