-- Per-IP and sign-in counters are hit on every agent-token and sign-in request. Unlogged, a
-- hit costs no WAL flush; a crash of the PostgreSQL server empties the table, which only
-- restarts the current windows (docs/decisions/0052-token-endpoint-cost.md).
ALTER TABLE "rate_limit_counters" SET UNLOGGED;
