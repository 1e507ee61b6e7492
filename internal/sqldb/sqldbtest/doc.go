// Package sqldbtest gives tests a migrated database of their own: a fresh
// MariaDB/MySQL database per call (created, then dropped at cleanup) or a
// fresh SQLite file. Tests never skip when MariaDB is missing: they fail.
// TEST_MYSQL_DSN names the server (default DefaultDSN), TEST_MYSQL_ENGINE
// its engine (default mariadb; see Engine).
package sqldbtest
