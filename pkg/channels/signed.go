package channels

import "fmt"

// StatementVerifier checks the signature of a statement event: value is the
// whole Kafka message value, signature the value of its
// x-paycb-statement-signature header ("" when the message has none).
// statementauth.Keys is the implementation. Its error is the
// reason the event is refused, written into the dead letter: it must never
// reveal a secret.
type StatementVerifier interface {
	Verify(value []byte, signature string) error
}

// VerifyStatements makes DecodeMessage check every statement event with v
// before reading its body. Without it (or with a nil v) DecodeMessage
// refuses every statement event.
func VerifyStatements(v StatementVerifier) DecoderOption {
	return func(d *Decoder) { d.statements = v }
}

// DecodeMessage decodes one Kafka message as the worker must: like Decode,
// except that an envelope of content type ContentTypeStatement must first
// carry a valid signature (the decoder's StatementVerifier accepts value and
// signature, the message's x-paycb-statement-signature header), checked
// before its body is read. A statement event without one fails with
// KindUnauthenticated, keeping its tenant and channel; so does every
// statement event when the decoder has no verifier. Callbacks of the
// channels (the other content types) are decoded as by Decode, whatever
// signature says.
func (d *Decoder) DecodeMessage(value []byte, signature string) (Result, error) {
	env, err := ParseEnvelope(value)
	if err != nil {
		return partial(env), err
	}
	if env.FromStatement() {
		if d.statements == nil {
			return partial(env), errorf(KindUnauthenticated, "statement event: no statement key is configured to verify its signature")
		}
		if err := d.statements.Verify(value, signature); err != nil {
			return partial(env), &Error{Kind: KindUnauthenticated, Err: fmt.Errorf("statement event: %w", err)}
		}
	}
	return d.decode(env)
}
