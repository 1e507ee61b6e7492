// Package testpki generates, for tests, a certificate authority of the
// test's own and a server and a client certificate it signed, as PEM files
// in the test's temporary directory: the one test PKI behind the TLS tests
// of MySQL (sqldbtest) and Kafka (kafkaconntest). Nothing here is fit for
// production use.
package testpki
