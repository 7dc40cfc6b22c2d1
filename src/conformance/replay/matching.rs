//! Matching what acp-lsp sent against the recording: the lines still
//! awaited on a channel, waiting for one, comparing after normalisation,
//! and what a match learns (bindings, request ids) or a mismatch shows.

use super::*;

/// What a successful comparison learnt.
pub(super) struct Matched {
    learnt: Bindings,
    /// (recorded id, live id) of a request toward a server.
    request_ids: Option<(String, String)>,
}

/// A failed comparison: where, and both sides normalised.
pub(super) struct Mismatch {
    reason: String,
    recorded: Value,
    live: Value,
}

impl Replay<'_> {
    /// The lines from `index` on that wait for a message on `channel`.
    pub(super) fn remaining(&self, index: usize, channel: &Channel) -> Vec<&'_ Line> {
        self.scenario.lines[index..]
            .iter()
            .filter(|l| expected_channel(&l.dir).as_ref() == Some(channel))
            .filter(|l| matches!(l.body, Body::Message(_) | Body::Text(_)))
            .collect()
    }

    pub(super) async fn expect(
        &mut self,
        index: usize,
        line: &Line,
        channel: &Channel,
    ) -> Result<(), Failure> {
        if *channel == Channel::Agent && self.agent.is_none() {
            self.agent()
                .await
                .map_err(|e| Failure::new(Some(line.number), e))?;
        }
        let deadline = self.deadline();
        loop {
            if let Some(done) = self.try_match(index, line, channel)? {
                return done;
            }
            let Some(inbox) = self.inbox_of(channel) else {
                return Err(Failure::new(
                    Some(line.number),
                    format!(
                        "expected a message on {}, which is not connected",
                        line.dir.label()
                    ),
                ));
            };
            if !inbox.more(deadline).await {
                return Err(self.timed_out(line, channel));
            }
        }
    }

    /// `Some(Ok)` when a received message matched `line`; `Some(Err)` when one
    /// matches no line still expected on the channel; `None` to wait for more.
    #[allow(clippy::type_complexity)]
    pub(super) fn try_match(
        &mut self,
        index: usize,
        line: &Line,
        channel: &Channel,
    ) -> Result<Option<Result<(), Failure>>, Failure> {
        let Some(inbox) = self.inbox_of(channel) else {
            return Ok(None);
        };
        inbox.drain();
        let candidates: Vec<(usize, String)> = inbox
            .unconsumed()
            .map(|(i, r)| (i, r.text.clone()))
            .collect();
        for (at, text) in &candidates {
            if let Ok(matched) = self.compare_line(line, text, channel) {
                self.accept(channel, *at, matched);
                return Ok(Some(Ok(())));
            }
        }
        let remaining = self.remaining(index, channel);
        for (_, text) in &candidates {
            let wanted = remaining
                .iter()
                .any(|l| self.compare_line(l, text, channel).is_ok());
            if !wanted {
                let mismatch = self.compare_line(line, text, channel).err();
                let mut failure = Failure::new(
                    Some(line.number),
                    format!(
                        "acp-lsp sent on {} a message no remaining line of the recording has{}",
                        channel_label(channel),
                        mismatch
                            .as_ref()
                            .map(|m| format!(" (against this line: {})", m.reason))
                            .unwrap_or_default()
                    ),
                );
                if let Some(m) = mismatch {
                    failure = failure.with_diff(&m.recorded, &m.live);
                }
                return Err(failure);
            }
        }
        Ok(None)
    }

    pub(super) fn accept(&mut self, channel: &Channel, at: usize, matched: Matched) {
        for (placeholder, live) in matched.learnt.servers {
            self.bindings.servers.entry(placeholder).or_insert(live);
        }
        let text = match self.inbox_of(channel) {
            Some(inbox) => {
                inbox.received[at].consumed = true;
                inbox.received[at].text.clone()
            }
            None => return,
        };
        if let (Channel::Server(id), Some(ids)) = (channel, matched.request_ids) {
            if let Some(stand) = self.stands.get_mut(id) {
                stand.ids.push(ids);
            }
        }
        if *channel == Channel::Editor {
            self.note_write(&text);
        }
    }

    /// The editor's buffers: what `fs/write_text_file` asked it to write.
    pub(super) fn note_write(&mut self, text: &str) {
        let Ok(value) = serde_json::from_str::<Value>(text) else {
            return;
        };
        if value.get("method").and_then(Value::as_str) != Some("fs/write_text_file") {
            return;
        }
        if let Some((path, content)) = written_file(&value["params"]) {
            self.buffers.insert(path, content);
        }
    }

    pub(super) fn timed_out(&mut self, line: &Line, channel: &Channel) -> Failure {
        let seconds = self.timeout.as_secs();
        let first_left = self
            .inbox_of(channel)
            .and_then(|inbox| inbox.unconsumed().next().map(|(_, r)| r.text.clone()));
        let mut failure = Failure::new(
            Some(line.number),
            format!(
                "acp-lsp sent nothing equal to this {} line within {seconds} s",
                line.dir.label()
            ),
        );
        if let Some(text) = first_left {
            if let Err(m) = self.compare_line(line, &text, channel) {
                failure.message.push_str(&format!(
                    "; the first unmatched message it sent differs at {}",
                    m.reason
                ));
                failure = failure.with_diff(&m.recorded, &m.live);
            }
        } else if let Body::Message(raw) = &line.body {
            let recorded: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
            failure = failure.with_diff(&recorded, &Value::Null);
        }
        failure
    }

    pub(super) fn compare_line(
        &self,
        line: &Line,
        live_text: &str,
        channel: &Channel,
    ) -> Result<Matched, Box<Mismatch>> {
        let toward_server = matches!(channel, Channel::Server(_));
        let live_recorded = self.bindings.to_recorded(live_text);
        let (recorded_text, is_text) = match &line.body {
            Body::Message(raw) => (raw.get(), false),
            Body::Text(text) => (text.as_str(), true),
            _ => {
                return Err(Box::new(Mismatch {
                    reason: "not a message line".into(),
                    recorded: Value::Null,
                    live: Value::Null,
                }))
            }
        };
        if is_text {
            return if live_recorded == recorded_text {
                Ok(Matched {
                    learnt: Bindings::default(),
                    request_ids: None,
                })
            } else {
                Err(Box::new(Mismatch {
                    reason: "text differs".into(),
                    recorded: Value::String(recorded_text.to_string()),
                    live: Value::String(live_recorded),
                }))
            };
        }
        let mut recorded: Value = serde_json::from_str(recorded_text).unwrap_or(Value::Null);
        let mut live: Value = match serde_json::from_str(&live_recorded) {
            Ok(v) => v,
            Err(_) => {
                return Err(Box::new(Mismatch {
                    reason: "acp-lsp sent bytes that are not JSON".into(),
                    recorded,
                    live: Value::String(live_recorded),
                }))
            }
        };
        let mut request_ids = None;
        if toward_server {
            let is_request = |v: &Value| v.get("method").is_some() && v.get("id").is_some();
            if is_request(&recorded) && is_request(&live) {
                let ids = (recorded["id"].to_string(), live["id"].to_string());
                if let (Some(a), Some(b)) = (recorded.as_object_mut(), live.as_object_mut()) {
                    a.remove("id");
                    b.remove("id");
                }
                request_ids = Some(ids);
            }
            if live.get("method").and_then(Value::as_str) == Some("$/cancelRequest") {
                if let Channel::Server(id) = channel {
                    let ids = self.stands.get(id).map(|s| s.ids.as_slice()).unwrap_or(&[]);
                    let live_id = live["params"]["id"].to_string();
                    if let Some((recorded_id, _)) = ids.iter().find(|(_, l)| *l == live_id) {
                        if let Ok(v) = serde_json::from_str(recorded_id) {
                            live["params"]["id"] = v;
                        }
                    }
                }
            }
        }
        let changed = normalize_fields(&mut recorded, toward_server)
            | normalize_fields(&mut live, toward_server);
        let mut learnt = self.bindings.clone();
        if let Err(path) = compare(&recorded, &live, &mut learnt) {
            return Err(Box::new(Mismatch {
                reason: format!("differs at {path}"),
                recorded,
                live,
            }));
        }
        // Toward the editor and the agent, what acp-lsp passes through must
        // be byte for byte what it received.
        if !toward_server && !changed && live_recorded != recorded_text {
            return Err(Box::new(Mismatch {
                reason: "same JSON but different bytes".into(),
                recorded: Value::String(recorded_text.to_string()),
                live: Value::String(live_recorded),
            }));
        }
        learnt
            .servers
            .retain(|k, _| !self.bindings.servers.contains_key(k));
        Ok(Matched {
            learnt,
            request_ids,
        })
    }
}
