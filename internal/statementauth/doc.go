// Package statementauth signs and verifies the statement events that
// `consumer statement reconcile --publish-missing` publishes: its one job is
// to tell the worker that a message of the statement content type
// (application/vnd.paycb.statement+json), whose body is the canonical event
// in clear, was published by someone who holds a statement key, not by
// anyone else who can write to the input topic.
//
// A signature is the Kafka header HeaderSignature,
// "<key id>:<lowercase hex HMAC-SHA256 of the whole message value>", made with
// the current (first) key of the key file; every key of the file verifies,
// so a rotation adds the new key second, lets every worker read it, then
// puts it first where --publish-missing runs.
//
// It must never log, print or put in an error a secret or a part of one, nor
// accept a signature by any comparison but a constant-time one of the whole
// MAC; it never reads the message's body.
package statementauth
