-- tasks carry files both ways: what the user sent with the burst that started them (JSON list of
-- attachments) and what the result sends back (JSON list of artifacts, stored as they are chosen).
ALTER TABLE tasks ADD COLUMN attachments TEXT NOT NULL DEFAULT '[]';
ALTER TABLE tasks ADD COLUMN artifacts TEXT NOT NULL DEFAULT '[]';
