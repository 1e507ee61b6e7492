package channels

import "github.com/paycallback/paycallback/pkg/channels/internal/jsonscan"

// The envelope is decoded in one pass without reflection
// (internal/jsonscan); on anything unusual the caller decodes with
// encoding/json, so the outcome is always what encoding/json gives;
// FuzzFastEnvelope holds the fast path to that.

var envelopeKeys = []string{"tenant_id", "channel", "received_at", "content_type", "body"}

// fastEnvelope is the one-pass decoder of an envelope.
func fastEnvelope(data []byte, env *Envelope) bool {
	s := jsonscan.New(data)
	s.WS()
	ok := s.Object(envelopeKeys, 0, func(i int) bool {
		var ok bool
		switch i {
		case 0:
			env.TenantID, ok = s.Int()
		case 1:
			env.Channel, ok = s.Str()
		case 2:
			ok = s.Time(&env.ReceivedAt)
		case 3:
			env.ContentType, ok = s.Str()
		case 4:
			env.Body, ok = s.Str()
		}
		return ok
	})
	return ok && s.End()
}
