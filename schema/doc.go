// Package schema holds the database schema as versioned SQL migrations,
// embedded in the binary, and the one runner that applies them. `consumer
// migrate`, the demo and every test share this runner, so the schema under
// test is the schema in production.
//
// Two dialects are kept side by side: mysql/ (MySQL 8.4 and MariaDB 10.11
// alike) and sqlite/ (the embedded database of the demo). A migration never
// deletes claim, ledger or order rows.
package schema
