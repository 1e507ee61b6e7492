package main

func queryCmd() command {
	return command{
		name:    "query",
		summary: "the active query: ask the channels about payments and refunds no callback settled",
		description: `The active query (docs/querier.md, docs/queries.md): asking a channel about an
order or a refund whose callback did not come, with the querier's API
credentials (PAYCB_QUERY_CREDENTIALS_FILE, read by consumer query only,
never by run), reading the answer with the channel's own verification
(PAYCB_CHANNEL_PUBLIC_KEYS_FILE), and publishing an answer that proves a
payment or refund to the input topic, signed with the statement key, for
the worker to settle through the claim.`,
		verbs: []command{
			queryOnceCmd(),
		},
	}
}
