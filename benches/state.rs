//! Cost of sealing and opening `requestState` tokens as a chain accumulates answers.
//!
//! Each answered question carries an elicitation answer of about 1 KB, the size of a filled
//! form. The token sizes are printed once per case: they travel on every retry.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use serde_json::json;

use mrtr_gateway::mrtr::journal::{Answered, Journal};
use mrtr_gateway::mrtr::{
    arguments_digest, question_digest, Binding, CodecSettings, InputKind, KeyRing, KeySecret, StateCodec,
};
use mrtr_gateway::protocol::methods::MrtrMethod;

const NOW: u64 = 1_800_000_000;
const ANSWER_BYTES: usize = 1024;

fn codec() -> StateCodec {
    let secrets = vec![
        KeySecret::new([1; 32], Some("current".to_owned())).expect("valid label"),
        KeySecret::new([2; 32], Some("previous".to_owned())).expect("valid label"),
    ];
    StateCodec::new(KeyRing::new(secrets).expect("two distinct keys"), CodecSettings::default())
}

fn binding() -> Binding {
    Binding {
        principal: "user-7f3a9c".to_owned(),
        method: MrtrMethod::ToolsCall,
        target: "book_flight".to_owned(),
        arguments: arguments_digest(Some(&json!({"from": "CDG", "to": "SFO"}))),
    }
}

/// A journal of `count` answered form elicitations of about 1 KB each.
fn journal(count: usize) -> Journal {
    let answered = (0..count)
        .map(|i| {
            let filler = "x".repeat(ANSWER_BYTES - 80);
            let answer = json!({"action": "accept",
                                "content": {"name": format!("Passenger {i}"), "notes": filler}});
            Answered {
                digest: question_digest("elicitation/create", Some(&json!({"message": i}))),
                occurrence: 0,
                kind: InputKind::Elicitation,
                result: serde_json::value::to_raw_value(&answer).expect("a JSON value"),
            }
        })
        .collect();
    Journal { answered, pending: Vec::new(), next_key: count as u32 }
}

fn state(c: &mut Criterion) {
    let codec = codec();
    let binding = binding();
    let mut group = c.benchmark_group("state");
    for count in [1usize, 4, 8] {
        let journal = journal(count);
        let token = codec.seal_at(&binding, 2, &journal, NOW).expect("fits");
        println!("state token with {count} answers of ~1 KB: {} bytes", token.len());
        group.bench_with_input(BenchmarkId::new("seal", count), &journal, |b, j| {
            b.iter(|| codec.seal_at(&binding, 2, black_box(j), NOW))
        });
        group.bench_with_input(BenchmarkId::new("open", count), &token, |b, t| {
            b.iter(|| codec.open_at(black_box(t), &binding, NOW + 5))
        });
    }
    group.finish();
}

criterion_group!(benches, state);
criterion_main!(benches);
