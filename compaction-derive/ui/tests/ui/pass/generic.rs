//! Generic structs: bounds are added only for fields whose type mentions a parameter.
use compaction::{Compactable, FieldClass};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize, Default)]
struct Inner<T> {
    #[protected]
    value: T,
}

#[derive(Compactable, Serialize, Deserialize, Default)]
struct State<T, U, N> {
    #[protected]
    id: T,
    #[redundant(summarize)]
    notes: Vec<U>,
    #[nested]
    inner: Option<N>,
    #[redundant]
    plain: String,
}

// `NotData` implements nothing: a parameter that no field mentions needs no bound.
struct NotData;

#[derive(Compactable, Serialize, Deserialize)]
struct Phantom<P: 'static> {
    #[protected]
    id: u32,
    #[serde(skip)]
    #[redundant]
    marker: std::marker::PhantomData<fn() -> P>,
}

#[test]
fn generic_structs_bound_only_what_fields_need() {
    let schema = State::<u64, String, Inner<bool>>::schema();
    assert_eq!(
        schema.field("id").unwrap().class,
        FieldClass::Protected { pin: false }
    );
    assert_eq!(
        schema.field("notes").unwrap().class,
        FieldClass::Redundant { summarize: true }
    );
    assert!(schema.field("inner.value").is_some());
    let _ = State::<String, u8, Inner<String>>::schema();
    assert_eq!(Phantom::<NotData>::schema().fields().len(), 2);
}
