package deadletters

import (
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
)

// HeaderView is one header of a dead letter, its value as text.
type HeaderView struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// EnvelopeView is the envelope of a dead letter's value, as far as it
// parses.
type EnvelopeView struct {
	TenantID    int64     `json:"tenant_id"`
	Channel     string    `json:"channel"`
	ReceivedAt  time.Time `json:"received_at"`
	ContentType string    `json:"content_type"`
	// Valid is false when the envelope does not pass the contract's
	// checks; Problem then says why.
	Valid   bool   `json:"valid"`
	Problem string `json:"problem,omitempty"`
}

// View is everything about one dead letter, for `consumer dlq
// show`: where it is, its headers, key and value decoded as far as they
// go, and its status.
type View struct {
	// ID is the dead letter's stable id (LetterID); empty when ViewOf was
	// given no state.
	ID           string       `json:"id,omitempty"`
	Position     string       `json:"position"`
	Time         time.Time    `json:"time"`
	Headers      []HeaderView `json:"headers"`
	Key          string       `json:"key"`
	Kind         string       `json:"kind"`
	Error        string       `json:"error"`
	Source       string       `json:"source"`
	ValueOmitted bool         `json:"value_omitted"`
	ValueBytes   int          `json:"value_bytes"`
	// BodyLost is set when the dead-letter topic no longer holds the dead
	// letter: what is shown comes from its ss_dead_letter row.
	BodyLost bool `json:"body_lost"`
	// RedrivenFrom is the dead letter whose redrive failed again into this
	// one (x-redriven-from), when it was a redrive.
	RedrivenFrom string `json:"redriven_from,omitempty"`
	// Envelope is nil when the value is not an envelope at all (then
	// Value holds it as text).
	Envelope *EnvelopeView `json:"envelope,omitempty"`
	// Body is the callback body exactly as received. A WeChat body holds
	// only ciphertext.
	Body string `json:"body,omitempty"`
	// Resource is the encrypted resource of a channel that has one
	// (channels.Spec.ViewResource); its JSON name is kept for the
	// operators' tools that read it.
	Resource *channels.ResourceView `json:"wechat_resource,omitempty"`
	// Value is the raw value when it is not an envelope.
	Value string `json:"value,omitempty"`
	// Status is open, resolved, closed, redriven or duplicate; empty when
	// not known (no database).
	Status    Status     `json:"status,omitempty"`
	Recorded  bool       `json:"recorded"`
	ClosedAt  *time.Time `json:"closed_at,omitempty"`
	ClosedBy  string     `json:"closed_by,omitempty"`
	CloseNote string     `json:"close_note,omitempty"`
	SettledAt *time.Time `json:"settled_at,omitempty"`
	Outcome   string     `json:"settle_outcome,omitempty"`
	// Successor is the id of the dead letter that took its place when its
	// redrive failed again (status redriven).
	Successor string `json:"successor,omitempty"`
}

// ViewOf builds the view of d. With keys not nil, an encrypted
// resource (channels.Spec.ViewResource) is decrypted with the tenant's
// keys (current first) and its
// plaintext included; with keys nil it never is. st, when not nil, is d's
// status (States).
func ViewOf(dlqTopic string, d Message, st *State, keys channels.KeyProvider) View {
	v := View{
		Position: d.Position(dlqTopic), Time: d.Time.UTC(), Key: string(d.Key), Kind: d.Kind, Error: d.Error,
		Source: d.Source, ValueOmitted: d.ValueOmitted, ValueBytes: len(d.Value), Headers: []HeaderView{},
		BodyLost: d.BodyLost, RedrivenFrom: headerOf(d.Headers, HeaderRedrivenFrom),
	}
	for _, h := range d.Headers {
		v.Headers = append(v.Headers, HeaderView{Key: h.Key, Value: string(h.Value)})
	}
	if st != nil {
		v.ID, v.Status, v.Recorded, v.SettledAt, v.Outcome = st.ID, st.Status, st.Record != nil, st.SettledAt, st.Outcome
		v.Successor = st.Successor
		if r := st.Record; r != nil {
			v.ClosedAt, v.ClosedBy, v.CloseNote = r.ClosedAt, r.ClosedBy, r.CloseNote
			if v.RedrivenFrom == "" {
				v.RedrivenFrom = r.RedrivenFrom
			}
		}
	}
	if d.ValueOmitted || len(d.Value) == 0 {
		return v
	}
	var env channels.Envelope
	if err := channels.DecodeJSON(d.Value, &env); err != nil {
		v.Value = string(d.Value)
		return v
	}
	v.Envelope = &EnvelopeView{TenantID: env.TenantID, Channel: env.Channel, ReceivedAt: env.ReceivedAt.UTC(), ContentType: env.ContentType, Valid: true}
	if err := env.Validate(); err != nil {
		v.Envelope.Valid, v.Envelope.Problem = false, err.Error()
	}
	v.Body = env.Body
	if spec, ok := channels.Lookup(channels.Channel(env.Channel)); ok && spec.ViewResource != nil {
		v.Resource = spec.ViewResource(env, keys)
	}
	return v
}
