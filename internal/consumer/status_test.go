package consumer_test

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/consumer"
)

func TestAdminEndpointFromClientID(t *testing.T) {
	tests := []struct {
		name, clientID, clientHost string
		want                       string
		ok                         bool
	}{
		{name: "specific host", clientID: "paycb@10.1.2.3:9464", clientHost: "/10.9.9.9", want: "10.1.2.3:9464", ok: true},
		{name: "every interface, Apache Kafka host", clientID: "paycb@[::]:9464", clientHost: "/10.0.0.5", want: "10.0.0.5:9464", ok: true},
		{name: "every interface, host with port", clientID: "paycb@0.0.0.0:9464", clientHost: "127.0.0.1:51234", want: "127.0.0.1:9464", ok: true},
		{name: "no host, IPv6 client", clientID: "paycb@:9464", clientHost: "/0:0:0:0:0:0:0:1", want: "[0:0:0:0:0:0:0:1]:9464", ok: true},
		{name: "host name", clientID: "paycb@worker-1.internal:9464", clientHost: "/10.0.0.5", want: "worker-1.internal:9464", ok: true},
		{name: "another client", clientID: "kafka-go", clientHost: "/10.0.0.5"},
		{name: "nothing announced", clientID: "paycb@", clientHost: "/10.0.0.5"},
		{name: "no port", clientID: "paycb@10.1.2.3", clientHost: "/10.0.0.5"},
		{name: "port zero", clientID: "paycb@10.1.2.3:0", clientHost: "/10.0.0.5"},
		{name: "unspecified and no client host", clientID: "paycb@[::]:9464"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := consumer.AdminEndpoint(tt.clientID, tt.clientHost)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestClientIDRoundTrip(t *testing.T) {
	addr := &net.TCPAddr{IP: net.IPv6unspecified, Port: 9464}
	id := consumer.ClientID(addr)
	assert.Equal(t, "paycb@[::]:9464", id)
	got, ok := consumer.AdminEndpoint(id, "/192.0.2.7")
	require.True(t, ok)
	assert.Equal(t, "192.0.2.7:9464", got)
	assert.Equal(t, consumer.ClientIDPrefix, consumer.ClientID(nil))

	d := consumer.WithClientID(nil, id)
	assert.Equal(t, id, d.ClientID)
}
