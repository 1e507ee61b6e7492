// Command consumer is the paycallback worker: it consumes payment-channel
// callbacks from Kafka and posts each event to the settlement ledger exactly
// once. See `consumer help` for its commands.
package main
