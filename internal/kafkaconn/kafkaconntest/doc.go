// Package kafkaconntest generates, for tests, the certificates a TLS Kafka
// listener and its clients need: a CA, a broker certificate for 127.0.0.1
// and localhost signed by it, and a client certificate signed by it, as PEM
// files in the test's temporary directory. Nothing here is fit for
// production use.
package kafkaconntest
