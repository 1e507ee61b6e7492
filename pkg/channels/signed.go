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
// except that an envelope the project signs itself (content type
// ContentTypeStatement or ContentTypeQuery, Envelope.SignedByUs) must first
// carry a valid signature (the decoder's StatementVerifier accepts value and
// signature, the message's x-paycb-statement-signature header), checked
// before its body is read. Such a message without one fails with
// KindUnauthenticated, keeping its tenant and channel; so does every such
// message when the decoder has no verifier. A query answer is then verified
// with the channel's own keys (VerifyQueryAnswers) before it is read, its
// time judged at the envelope's received_at (see decodeQuery): a channel
// that signs its answers (WeChat, Alipay) needs both signatures, one that
// does not (Shouqianba) the statement signature alone. Callbacks of the
// channels (the other content types) are decoded as by Decode, whatever
// signature says.
func (d *Decoder) DecodeMessage(value []byte, signature string) (Result, error) {
	env, err := ParseEnvelope(value)
	if err != nil {
		return partial(env), err
	}
	if env.SignedByUs() {
		what := "statement event"
		if env.FromQuery() {
			what = "query answer"
		}
		if d.statements == nil {
			return partial(env), errorf(KindUnauthenticated, "%s: no statement key is configured to verify its signature", what)
		}
		if err := d.statements.Verify(value, signature); err != nil {
			return partial(env), &Error{Kind: KindUnauthenticated, Err: fmt.Errorf("%s: %w", what, err)}
		}
	}
	return d.decode(env)
}
