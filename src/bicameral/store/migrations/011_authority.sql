-- Whose words caused a task or a schedule: JSON {"role": 1-3, "people": ["channel:user", ...]}, the least
-- role of everyone who wrote any of its text. NULL on rows from before: read as their creator's alone.
ALTER TABLE tasks ADD COLUMN authority TEXT;
ALTER TABLE schedules ADD COLUMN authority TEXT;
ALTER TABLE schedule_fires ADD COLUMN authority TEXT;
-- Whose words a message the assistant sent answers (JSON list of `channel:user`): only they (and the
-- owner) may later have it edited or deleted. NULL: a notice, or sent before this was kept.
ALTER TABLE messages ADD COLUMN audience TEXT;
