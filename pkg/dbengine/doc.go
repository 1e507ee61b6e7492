// Package dbengine tells which MySQL-compatible server a connection reaches
// (MySQL, MariaDB or TiDB) by what the server is, never by its banner:
// VERSION() is a setting an operator may change (TiDB's server-version,
// MariaDB's --version), and a worker that took TiDB for MySQL would lock
// rows as MySQL does, which TiDB does not honour. That is its one job;
// every place that depends on the engine asks Detect.
package dbengine
