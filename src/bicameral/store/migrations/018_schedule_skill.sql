-- A reminder or scheduled task can carry a skill to run (issue 28): its name, set through schedule_create and
-- never parsed out of the text, so a person typing the same words sends plain text. When it fires, the task is
-- that skill's instructions with the schedule's text as context. NULL: an ordinary schedule.
ALTER TABLE schedules ADD COLUMN skill TEXT;
ALTER TABLE schedule_fires ADD COLUMN skill TEXT;
