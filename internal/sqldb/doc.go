// Package sqldb opens the worker's databases with the settings its
// guarantees rely on: MySQL/MariaDB in strict mode with UTC times, and the
// embedded SQLite database in WAL mode with write transactions that start
// with BEGIN IMMEDIATE. Open adds to a configured pool the TLS the
// configuration asks for, and SetLogger sends the database libraries' own
// log lines through the process's slog logger. It never logs a DSN, nor
// quotes a password in an error: DSNs carry passwords.
package sqldb
