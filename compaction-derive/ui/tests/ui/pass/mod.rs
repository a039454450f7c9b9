//! The cases that must compile (and whose assertions must hold): modules of the UI test crate,
//! so the ordinary test build compiles them with no second build of the dependencies.

mod cfg_fields;
mod crate_override;
mod generic;
mod in_function_body;
mod nested_option_vec;
mod plain_carriers;
mod raw_identifiers;
mod serde_rename;
mod summarizable_types;
mod transcript;
mod two_derives_one_module;
