-- Several workers over one database: which worker recorded an entry or delivers it now, and until when it keeps it.
-- Another worker attempts the entry only once the claim lapsed (its recorder died). NULL: no claim (one process).
ALTER TABLE outbox ADD COLUMN worker TEXT;
ALTER TABLE outbox ADD COLUMN claimed_until REAL;
