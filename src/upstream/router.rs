//! Attribution of every message a legacy server sends to the call it belongs to, the same for
//! every transport.
//!
//! A message on a call's POST stream belongs to that call. A message on a stream that ties
//! nothing to a call (the standalone GET stream, a child's stdout) goes to the *attached* call:
//! the MRTR call that holds the session's lease. `ping` is answered here, never surfaced. A
//! server request nobody can answer truthfully (no attached call, or a list method that may not
//! return `input_required`) gets a JSON-RPC error, never invented data: an empty `roots/list`
//! answer would be cached by the server as the truth. The one exception is `roots/list` when
//! the operator configured the roots (`upstream.roots`): those are the truth, so they answer.
//! A `notifications/tools/list_changed` is also counted ([`ToolsChanged`]), whoever it goes to.
//! A session opened for `subscriptions/listen` has a *listener* queue: the notifications a
//! listen stream may carry (list changes, resource updates) go there, whatever stream carried
//! them, instead of to a call. While its key's listen session is lent to calls, a pooled
//! session leased to one of them has a *tap* instead: the list changes it hears go there, to the
//! listen streams, since a per-session server tells only the session whose call changed a list.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{json, Value};

use super::event::{EventTx, Origin, UpstreamEvent};
use super::settings::ToolsChanged;
use crate::protocol::jsonrpc::{ErrorObject, Notification, Request, Response};
use crate::protocol::{codes, methods, Envelope, RequestId};

/// What to do with one routed message.
pub(crate) enum Action {
    Deliver(EventTx, UpstreamEvent),
    /// To a listen session's queue, never waiting: a call's stream must not stall on it.
    Tap(EventTx, UpstreamEvent),
    Answer(RequestId, Result<Value, ErrorObject>),
    Ignore(&'static str),
}

struct Slot {
    tx: EventTx,
    /// False for list-like requests: their server requests are refused upstream.
    surfaces_requests: bool,
}

/// The in-flight calls of one session.
#[derive(Default)]
pub(crate) struct Router {
    /// By upstream request id, which the gateway mints: foldhash, not SipHash, as nothing
    /// here needs a keyed hash against chosen collisions.
    calls: HashMap<i64, Slot, foldhash::fast::RandomState>,
    attached: Option<i64>,
    /// The configured `roots/list` result, answered when no call can be asked.
    roots: Option<Arc<Value>>,
    tools_changed: ToolsChanged,
    /// Where the listenable notifications go on a session opened for listening.
    listener: Option<EventTx>,
    /// Where the list changes go on a pooled session while its key listens.
    tap: Option<EventTx>,
    /// Where what no call can take goes on a legacy client's own session while its GET stream
    /// is open (the legacy relay's seam), as a Streamable HTTP server would send it there.
    standalone: Option<EventTx>,
}

// === impl Router ===

impl Router {
    /// A router that answers unattributed `roots/list` requests with `roots` (a JSON array).
    pub(crate) fn with_roots(roots: Option<Arc<Value>>) -> Self {
        Self { roots, ..Self::default() }
    }

    /// Counts the session's `notifications/tools/list_changed` in `counter`.
    pub(crate) fn counting(self, counter: ToolsChanged) -> Self {
        Self { tools_changed: counter, ..self }
    }

    /// Sends the session's listenable notifications ([`is_listenable`]) to `tx` from now on.
    pub(crate) fn set_listener(&mut self, tx: EventTx) {
        self.listener = Some(tx);
    }

    pub(crate) fn listener(&self) -> Option<EventTx> {
        self.listener.clone()
    }

    /// Sends the session's list changes to `tap` (a listen session's queue), or no longer.
    pub(crate) fn set_tap(&mut self, tap: Option<EventTx>) {
        self.tap = tap;
    }

    /// Sends what no call can take (notifications, server requests) to `tx` from now on.
    pub(crate) fn set_standalone(&mut self, tx: EventTx) {
        self.standalone = Some(tx);
    }

    /// Stops sending to `tx`, unless another stream took its place meanwhile.
    pub(crate) fn clear_standalone(&mut self, tx: &EventTx) {
        if self.standalone.as_ref().is_some_and(|s| s.same_channel(tx)) {
            self.standalone = None;
        }
    }

    /// Registers a call; the first surfacing call becomes the GET-stream target.
    pub(crate) fn insert(&mut self, id: i64, tx: EventTx, surfaces_requests: bool) {
        self.calls.insert(id, Slot { tx, surfaces_requests });
        if surfaces_requests && self.attached.is_none() {
            self.attached = Some(id);
        }
    }

    /// Forgets a call: its further messages are dropped (or refused, for requests).
    pub(crate) fn remove(&mut self, id: i64) {
        self.calls.remove(&id);
        if self.attached == Some(id) {
            self.attached = None;
        }
    }

    pub(crate) fn is_pending(&self, id: i64) -> bool {
        self.calls.contains_key(&id)
    }

    /// Forgets every call and returns their queues, so a dead session can fail them.
    /// The listener queue is among them: it learns of the death the same way.
    pub(crate) fn drain(&mut self) -> Vec<EventTx> {
        self.attached = None;
        let calls = self.calls.drain().map(|(_, slot)| slot.tx);
        calls.chain(self.listener.take()).chain(self.standalone.take()).collect()
    }

    /// Decides where a message goes; the flag is true when it is the response that ends the
    /// call whose POST stream carried it.
    pub(crate) fn route(&mut self, env: Envelope, origin: Origin) -> (Action, bool) {
        if matches!(&env, Envelope::Notification(n) if n.method == methods::TOOLS_LIST_CHANGED) {
            self.tools_changed.note();
        }
        match env {
            Envelope::Request(req) if req.method == methods::PING => {
                (Action::Answer(req.id, Ok(Value::Object(Default::default()))), false)
            }
            Envelope::Request(req) => (self.route_request(req, origin), false),
            Envelope::Notification(n) => (self.route_notification(n, origin), false),
            Envelope::Response(resp) => self.route_response(resp, origin),
        }
    }

    fn route_notification(&self, n: Notification, origin: Origin) -> Action {
        let listener = self.listener.as_ref().filter(|_| is_listenable(&n.method)).cloned();
        let tap = self.tap.as_ref().filter(|_| is_list_change(&n.method)).cloned();
        let event = UpstreamEvent::Notification { method: n.method, params: n.params };
        if let Some(tx) = listener {
            return Action::Deliver(tx, event);
        }
        if let Some(tx) = tap {
            return Action::Tap(tx, event);
        }
        match self.target(origin) {
            Some(slot) => Action::Deliver(slot.tx.clone(), event),
            None => match &self.standalone {
                Some(tx) => Action::Deliver(tx.clone(), event),
                None => Action::Ignore("notification with no call to attribute it to"),
            },
        }
    }

    fn target(&self, origin: Origin) -> Option<&Slot> {
        let id = match origin {
            Origin::Post(id) => id,
            Origin::Unattributed => self.attached?,
        };
        self.calls.get(&id)
    }

    fn route_request(&self, req: Request, origin: Origin) -> Action {
        let target = self.target(origin);
        if let (None, Some(tx)) = (target, &self.standalone) {
            let event = UpstreamEvent::Request { id: req.id, method: req.method, params: req.params };
            return Action::Deliver(tx.clone(), event);
        }
        match target {
            Some(slot) if slot.surfaces_requests => {
                let event = UpstreamEvent::Request { id: req.id, method: req.method, params: req.params };
                Action::Deliver(slot.tx.clone(), event)
            }
            _ if req.method == methods::ROOTS_LIST => Action::Answer(req.id, self.configured_roots()),
            Some(_) => Action::Answer(
                req.id,
                Err(internal("the client cannot be asked for input during this method")),
            ),
            None => Action::Answer(
                req.id,
                Err(internal("no client request in flight to attribute this request to")),
            ),
        }
    }

    /// The answer to a `roots/list` no client can be asked: the configured roots, or an error.
    fn configured_roots(&self) -> Result<Value, ErrorObject> {
        match &self.roots {
            Some(roots) => Ok(json!({ "roots": roots.as_ref() })),
            None => Err(internal("the client's roots are not known yet (no client request in flight)")),
        }
    }

    fn route_response(&mut self, resp: Response, origin: Origin) -> (Action, bool) {
        let id = match (resp.id, origin) {
            (Some(RequestId::Number(n)), _) => n,
            // An error with no id on a call's own stream answers that call.
            (None, Origin::Post(n)) => n,
            _ => return (Action::Ignore("response to a request this session never sent"), false),
        };
        let Some(slot) = self.calls.remove(&id) else {
            return (Action::Ignore("response to a call no longer in flight"), false);
        };
        if self.attached == Some(id) {
            self.attached = None;
        }
        let ends_origin = origin == Origin::Post(id);
        (Action::Deliver(slot.tx, UpstreamEvent::Response(resp.outcome)), ends_origin)
    }
}

/// True for the notifications a `subscriptions/listen` stream may carry.
pub(crate) fn is_listenable(method: &str) -> bool {
    is_list_change(method) || method == methods::RESOURCES_UPDATED
}

/// A change of a list, which concerns every session of a key, not only one that subscribed.
fn is_list_change(method: &str) -> bool {
    matches!(
        method,
        methods::TOOLS_LIST_CHANGED | methods::PROMPTS_LIST_CHANGED | methods::RESOURCES_LIST_CHANGED
    )
}

fn internal(message: &str) -> ErrorObject {
    ErrorObject { code: codes::INTERNAL_ERROR, message: message.to_owned(), data: None }
}

#[cfg(test)]
mod tests {
    use tokio::sync::mpsc;

    use super::super::UpstreamError;
    use super::*;
    use crate::protocol::jsonrpc::Outcome;

    fn parse(text: &str) -> Envelope {
        Envelope::parse(text.as_bytes()).unwrap()
    }

    fn router_with(
        id: i64,
        surfaces: bool,
    ) -> (Router, mpsc::Receiver<Result<UpstreamEvent, UpstreamError>>) {
        let (tx, rx) = mpsc::channel(4);
        let mut router = Router::default();
        router.insert(id, tx, surfaces);
        (router, rx)
    }

    #[test]
    fn get_stream_request_goes_to_the_attached_call() {
        let (mut router, _rx) = router_with(5, true);
        let env = parse(r#"{"jsonrpc":"2.0","id":0,"method":"roots/list"}"#);
        let (action, ends) = router.route(env, Origin::Unattributed);
        assert!(
            matches!(action, Action::Deliver(_, UpstreamEvent::Request { ref method, .. }) if method == "roots/list")
        );
        assert!(!ends);
    }

    #[test]
    fn get_stream_request_without_call_is_refused_with_an_error() {
        let mut router = Router::default();
        let env = parse(r#"{"jsonrpc":"2.0","id":0,"method":"roots/list"}"#);
        let (action, _) = router.route(env, Origin::Unattributed);
        let Action::Answer(RequestId::Number(0), Err(e)) = action else { panic!("expected an error answer") };
        assert_eq!(e.code, codes::INTERNAL_ERROR);
    }

    #[test]
    fn unattributed_roots_request_gets_the_configured_roots_or_an_error() {
        let env = || parse(r#"{"jsonrpc":"2.0","id":4,"method":"roots/list"}"#);
        let roots = json!([{"uri": "file:///srv/data", "name": "data"}]);
        let mut router = Router::with_roots(Some(Arc::new(roots.clone())));
        let (Action::Answer(_, Ok(v)), _) = router.route(env(), Origin::Unattributed) else {
            panic!("configured roots not answered")
        };
        assert_eq!(v, json!({ "roots": roots }));
        let (Action::Answer(_, Err(e)), _) = Router::default().route(env(), Origin::Unattributed) else {
            panic!("expected an error answer")
        };
        assert!(e.message.contains("roots are not known yet"), "{}", e.message);
    }

    #[test]
    fn configured_roots_answer_only_a_roots_request() {
        let roots = Some(Arc::new(json!([{"uri": "file:///srv/data"}])));
        let ask = || parse(r#"{"jsonrpc":"2.0","id":6,"method":"elicitation/create","params":{}}"#);
        let mut idle = Router::with_roots(roots.clone());
        let (Action::Answer(_, Err(e)), _) = idle.route(ask(), Origin::Unattributed) else {
            panic!("an elicitation with no call in flight must be refused")
        };
        assert!(e.message.contains("no client request in flight"), "{}", e.message);
        let (tx, _rx) = mpsc::channel(4);
        let mut listing = Router::with_roots(roots);
        listing.insert(3, tx, false);
        let (Action::Answer(_, Err(e)), _) = listing.route(ask(), Origin::Post(3)) else {
            panic!("an elicitation during a list must be refused")
        };
        assert!(e.message.contains("cannot be asked for input"), "{}", e.message);
    }

    #[test]
    fn another_calls_response_leaves_the_attached_call_attached() {
        let (mut router, _rx) = router_with(2, true);
        let (tx, _other) = mpsc::channel(4);
        router.insert(3, tx, true);
        let done = parse(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#);
        assert!(matches!(router.route(done, Origin::Post(3)).0, Action::Deliver(..)));
        let env = parse(r#"{"jsonrpc":"2.0","id":1,"method":"roots/list"}"#);
        assert!(
            matches!(router.route(env, Origin::Unattributed).0, Action::Deliver(..)),
            "call 2 still takes the stream's requests"
        );
    }

    #[test]
    fn removing_another_call_leaves_the_attached_call_attached() {
        let (mut router, _rx) = router_with(2, true);
        let (tx, _other) = mpsc::channel(4);
        router.insert(3, tx, true);
        let ask = || parse(r#"{"jsonrpc":"2.0","id":1,"method":"roots/list"}"#);
        router.remove(3);
        assert!(
            matches!(router.route(ask(), Origin::Unattributed).0, Action::Deliver(..)),
            "call 2 still attached"
        );
        router.remove(2);
        assert!(
            matches!(router.route(ask(), Origin::Unattributed).0, Action::Answer(_, Err(_))),
            "none attached"
        );
    }

    #[test]
    fn an_error_without_an_id_on_a_calls_own_stream_answers_that_call() {
        let (mut router, _rx) = router_with(2, true);
        let refusal =
            || parse(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"bad request"}}"#);
        let (action, ends) = router.route(refusal(), Origin::Post(2));
        let Action::Deliver(_, UpstreamEvent::Response(Outcome::Error(e))) = action else {
            panic!("the call's own stream answered it")
        };
        assert_eq!(e.code, -32600);
        assert!(ends && !router.is_pending(2));
        assert!(
            matches!(router.route(refusal(), Origin::Unattributed).0, Action::Ignore(_)),
            "anywhere else, no call"
        );
    }

    #[test]
    fn list_request_refuses_server_requests_on_its_own_stream() {
        let (mut router, _rx) = router_with(3, false);
        let env = parse(r#"{"jsonrpc":"2.0","id":9,"method":"elicitation/create","params":{}}"#);
        assert!(matches!(router.route(env, Origin::Post(3)).0, Action::Answer(_, Err(_))));
        let env = parse(r#"{"jsonrpc":"2.0","id":10,"method":"roots/list"}"#);
        assert!(matches!(router.route(env, Origin::Unattributed).0, Action::Answer(_, Err(_))));
    }

    #[test]
    fn a_tools_list_change_is_counted_wherever_it_goes() {
        let counter = ToolsChanged::default();
        let (router, _rx) = router_with(7, true);
        let mut router = router.counting(counter.clone());
        let note = || parse(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#);
        assert!(matches!(router.route(note(), Origin::Post(7)).0, Action::Deliver(..)));
        let mut idle = Router::default().counting(counter.clone());
        assert!(matches!(idle.route(note(), Origin::Unattributed).0, Action::Ignore(_)));
        let other = parse(r#"{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}"#);
        idle.route(other, Origin::Unattributed);
        assert_eq!(counter.count(), 2);
    }

    #[test]
    fn a_listening_session_sends_listenable_notifications_to_its_listener() {
        let (mut router, _rx) = router_with(3, false);
        let (tx, _listener) = mpsc::channel(4);
        router.set_listener(tx.clone());
        let update =
            parse(r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"u"}}"#);
        let Action::Deliver(to, _) = router.route(update, Origin::Post(3)).0 else { panic!("not delivered") };
        assert!(to.same_channel(&tx), "an update on a call's stream still goes to the listener");
        let log = parse(r#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#);
        let Action::Deliver(to, _) = router.route(log, Origin::Post(3)).0 else { panic!("not delivered") };
        assert!(!to.same_channel(&tx), "a log message is the call's, never the listener's");
        let idle = parse(r#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#);
        assert!(matches!(Router::default().route(idle, Origin::Unattributed).0, Action::Ignore(_)));
        assert!(router.drain().iter().any(|q| q.same_channel(&tx)), "a dead session tells its listener");
    }

    #[test]
    fn ping_is_answered_with_an_empty_result() {
        let (mut router, _rx) = router_with(1, true);
        let env = parse(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#);
        let (Action::Answer(_, Ok(v)), _) = router.route(env, Origin::Post(1)) else {
            panic!("ping not answered")
        };
        assert_eq!(v, serde_json::json!({}));
    }

    #[test]
    fn response_ends_the_call_and_detaches_it() {
        let (mut router, _rx) = router_with(2, true);
        let env = parse(r#"{"jsonrpc":"2.0","id":2,"result":{}}"#);
        let (action, ends) = router.route(env, Origin::Post(2));
        assert!(matches!(action, Action::Deliver(_, UpstreamEvent::Response(_))));
        assert!(ends);
        assert!(!router.is_pending(2));
        let env = parse(r#"{"jsonrpc":"2.0","id":1,"method":"roots/list"}"#);
        assert!(matches!(router.route(env, Origin::Unattributed).0, Action::Answer(_, Err(_))));
    }
}
