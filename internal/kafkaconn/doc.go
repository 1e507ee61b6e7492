// Package kafkaconn turns the Kafka connection setting (brokers, TLS and
// SASL) into what kafka-go's clients need, once, so that every Kafka client
// in the binary (the consumer group and its partition readers, the
// dead-letter writer, the sweeper's read-back and every operator command)
// connects the same way.
//
// It must never log, print or return in an error the SASL password.
package kafkaconn
