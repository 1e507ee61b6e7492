// Package tlsclient builds the client side of a TLS setting (config.TLS),
// once, for every connection the worker makes over TLS: to the Kafka brokers
// (internal/kafkaconn) and to MySQL (internal/sqldb). Both read the same
// CA bundle, client certificate and key the same way, with the same floor
// (TLS 1.2) and the same errors, each naming the setting at fault.
//
// It must never fall back to plaintext, skip verification or put a key's
// content into an error.
package tlsclient
