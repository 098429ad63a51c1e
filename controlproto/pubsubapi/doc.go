// Package pubsubapi is the gRPC subscription service of gswitch's
// content-based forwarding (DESIGN.md: "pubsub API: the gRPC subscription
// service"): pubsubapi.proto, the code protoc generated from it (committed;
// gen.go says how to regenerate it) and Server, the service over a
// tables/pubsub.Table.
//
//	service gswitch.pubsub.v1.PubSub {
//	  Subscribe(port, predicate, replace) -> id, removed ids
//	  Unsubscribe(ids | port)             -> removed ids
//	  List(port | 0)                      -> subscriptions with their match counters
//	  Stats()                             -> table sizes, per-subscription matches, datapath counters
//	  Explain(event JSON, id | 0)         -> per filter: its constraints, which are satisfied; the ports
//	}
//
// Predicates are in tables/pubsub's subscription language, without the
// "PORT:" of a subscription line; a syntax error is INVALID_ARGUMENT with
// the column. Unsubscribe by ids removes all of them or none (an unknown
// id is NOT_FOUND).
//
// Publisher (publish.go) is the publishers' side: one UDP datagram per
// event, its payload the event's binary encoding (pubsub.Event.AppendWire,
// specified in tables/pubsub's doc), sent to gswitchd's pubsub udp_port on
// a host behind the switch.
//
// # Barrier
//
// A changing call returns only once its change is visible to the
// datapath: Subscribe and Unsubscribe change the table and then call
// Config.Barrier under the server's write lock, which serializes the
// changes. The CPU matcher reads the table under its read lock, so a
// change is visible to every batch matched after the table's writer
// returns, and the barrier is nil; a device backend passes the push of its
// pending bubbles. A barrier that fails answers UNAVAILABLE (the change is
// in the table).
package pubsubapi
