//! Runs beside mysqld: the write-lease rule, startup safety net and topology-mismatch rule.
