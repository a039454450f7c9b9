//! Writes the `Compactable` impl: the schema, the typed traversal, the rebuild, and the
//! compile-time checks that turn a misclassified field into an error at that field.

use crate::bound;
use crate::internals::ast::{Class, Container, Field};
use crate::internals::ctxt::Ctxt;
use crate::internals::template::Piece;
use crate::internals::{attr, check};
use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

pub fn derive(input: &syn::DeriveInput) -> TokenStream {
    let cx = Ctxt::new();
    let cont = attr::container(&cx, input, "Compactable");
    let templates = cont.as_ref().map(|c| check::check(&cx, c));
    match (cx.check(), cont, templates) {
        (Ok(()), Some(mut cont), Some(templates)) => {
            // The crate path is resolved once, by a `use` in the generated block, so a wrong
            // `#[compaction(crate = "...")]` is reported once; everything else names the alias.
            let original = std::mem::replace(&mut cont.crate_path, alias());
            let use_original = use_crate(&original);
            let body = expand(&cont, &templates);
            quote! {
                const _: () = {
                    #use_original
                    #body
                };
            }
        }
        (result, _, _) => {
            let errors = result.err().map(|e| e.to_compile_error());
            let stub = stub(input);
            quote!(#errors #stub)
        }
    }
}

/// An impl whose bodies are never reached, emitted next to the errors so the author sees the
/// real mistake instead of "`X` is not Compactable" wherever the type is used.
fn stub(input: &syn::DeriveInput) -> TokenStream {
    let cx = Ctxt::new();
    let original = attr::crate_path(&cx, input);
    let _ = cx.check();
    let krate = alias();
    let use_original = use_crate(&original);
    let ident = &input.ident;
    let carries = carries_state(&krate, ident, &input.generics);
    let generics = bound::with_static_bounds(input.generics.clone());
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    quote! {
        const _: () = {
            #use_original
            #carries
            #[automatically_derived]
            impl #impl_generics #krate::Compactable for #ident #ty_generics #where_clause {
                fn schema() -> &'static #krate::__private::Schema {
                    ::core::unreachable!()
                }
                fn visit<'__a, __V: #krate::__private::Visitor<'__a>>(&'__a self, _: &mut __V) {
                    ::core::unreachable!()
                }
                fn rebuild(
                    _: &mut #krate::__private::Parts,
                ) -> ::core::result::Result<Self, #krate::__private::RebuildError> {
                    ::core::unreachable!()
                }
            }
        };
    }
}

/// `use <crate path> as __compaction;`, spanned at the path, so an unresolved
/// `#[compaction(crate = "...")]` is reported at the string the author wrote.
fn use_crate(original: &syn::Path) -> TokenStream {
    let span = original
        .segments
        .first()
        .map_or_else(Span::call_site, |s| s.ident.span());
    respan(quote!(use #original as __compaction;), span)
}

/// The name the generated block gives the `compaction` crate.
fn alias() -> syn::Path {
    syn::parse_quote!(__compaction)
}

/// `tokens` with every span set to `span`, so an error in a generated check points at the field.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut tt| {
            if let TokenTree::Group(group) = &tt {
                let mut inner =
                    proc_macro2::Group::new(group.delimiter(), respan(group.stream(), span));
                inner.set_span(span);
                tt = TokenTree::Group(inner);
            } else {
                tt.set_span(span);
            }
            tt
        })
        .collect()
}

/// `impl CarriesState`: a value of this type may never sit in an evictable field. Written for
/// every type with a protected, effect or nested field (nested state may carry either).
fn carries_state(krate: &syn::Path, ident: &syn::Ident, generics: &syn::Generics) -> TokenStream {
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    quote! {
        #[automatically_derived]
        impl #impl_generics #krate::__private::CarriesState for #ident #ty_generics #where_clause {}
    }
}

fn expand(cont: &Container<'_>, templates: &[Option<Vec<Piece>>]) -> TokenStream {
    let krate = &cont.crate_path;
    let ident = cont.ident;
    let generics = bound::compactable(cont);
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    let is_generic = cont.generics.type_params().next().is_some();

    let type_name = ident.to_string();
    let schema_fields = cont.fields.iter().map(|f| schema_field(krate, f));
    let schema_body = quote! {
        let __builder = #krate::__private::Schema::builder(#type_name);
        #(#schema_fields)*
        __builder.build()
    };
    let schema_fn = if is_generic {
        quote!(#krate::__private::schema_for::<Self>(|| { #schema_body }))
    } else {
        quote! {
            static __SCHEMA: #krate::__private::OnceLock<#krate::__private::Schema> =
                #krate::__private::OnceLock::new();
            __SCHEMA.get_or_init(|| { #schema_body })
        }
    };
    let checks = cont.fields.iter().map(|f| compile_checks(krate, f));
    let visits = cont
        .fields
        .iter()
        .zip(templates)
        .map(|(f, t)| visit_field(krate, f, t.as_deref()));
    let rebuilds = cont.fields.iter().map(rebuild_field);
    let holds_state = cont.fields.iter().any(|f| f.class.holds_state());
    let carries = holds_state.then(|| carries_state(krate, ident, cont.generics));
    // A type with no state to keep is plain data, where the impl's bounds hold (so a generic
    // field of it is checked as its own field is). Not for a field-less type, which may derive
    // `Summarizable` as well (that derive writes the same impl).
    let plain = (!holds_state && !cont.fields.is_empty()).then(|| {
        quote! {
            #[automatically_derived]
            impl #impl_generics #krate::__private::PlainData for #ident #ty_generics #where_clause {}
        }
    });

    let gates = gates(krate);
    let transcript = transcript_accessor(cont, &generics);

    quote! {
        #carries
        #plain

        #gates

        #transcript

            #[automatically_derived]
            impl #impl_generics #krate::Compactable for #ident #ty_generics #where_clause {
                // `#[inline]` on the two non-generic methods: code is generated only where they
                // are used, not in every crate that derives (issue 5: derive compile cost).
                #[inline]
                fn schema() -> &'static #krate::__private::Schema {
                    #schema_fn
                }

                fn visit<'__a, __V: #krate::__private::Visitor<'__a>>(
                    &'__a self,
                    __visitor: &mut __V,
                ) {
                    #(#checks)*
                    #(#visits)*
                }

                #[inline]
                fn rebuild(
                    __parts: &mut #krate::__private::Parts,
                ) -> ::core::result::Result<Self, #krate::__private::RebuildError> {
                    ::core::result::Result::Ok(Self { #(#rebuilds)* })
                }
            }
    }
}

/// Gates between the generated body and the trait a field's class needs (`NestedField`,
/// `EffectRecords`, `Summarizable`, `Default`). Autoref selects the real method when the field
/// type has the trait and a silent fallback when it does not: then the field's own compile check
/// (see [`compile_checks`]) is the one and only error, at the field, instead of a second and third
/// copy at `#[derive(Compactable)]`. The fallbacks are never run: a build that selects one fails
/// (and were one ever reached, visiting panics rather than skip a field in silence).
fn gates(krate: &syn::Path) -> TokenStream {
    // The gates are declared once, in the core (`__private::gates`): declared here, in every
    // derive's output, they were a third of the derive's compile time (issue 5).
    quote! {
        #[allow(unused_imports)]
        use #krate::__private::gates::{
            DefaultNo as _, DefaultYes as _, EffectNo as _, EffectYes as _, Gate as __Gate,
            NestedNo as _, NestedYes as _, SummaryNo as _, SummaryYes as _, TranscriptNo as _,
            TranscriptYes as _,
        };
    }
}

/// `impl HasTranscript`: the state's `#[transcript]` field (a state has at most one, `check`
/// refuses a second), for a session to push the conversation into. Through the transcript
/// gate, so a field of another type has one error, its own check's.
fn transcript_accessor(cont: &Container<'_>, generics: &syn::Generics) -> TokenStream {
    let Some(field) = cont
        .fields
        .iter()
        .find(|f| matches!(f.class, Class::Transcript { .. }))
    else {
        return TokenStream::new();
    };
    let krate = &cont.crate_path;
    let ident = cont.ident;
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    let Field {
        member, ty, cfgs, ..
    } = field;
    let gate = quote!((&&__Gate::<#ty>::NEW));
    quote! {
        #(#cfgs)*
        #[automatically_derived]
        impl #impl_generics #krate::HasTranscript for #ident #ty_generics #where_clause {
            #[inline]
            fn transcript(&self) -> &#krate::Transcript {
                #gate.__as_transcript(&self.#member)
            }

            #[inline]
            fn transcript_mut(&mut self) -> &mut #krate::Transcript {
                #gate.__as_transcript_mut(&mut self.#member)
            }
        }
    }
}

fn class_tokens(krate: &syn::Path, class: &Class) -> TokenStream {
    let path = quote!(#krate::__private::FieldClass);
    match class {
        Class::Protected { pin } => quote!(#path::Protected { pin: #pin }),
        Class::Derivable { pointer, summarize } => {
            quote!(#path::Derivable { pointer_template: #pointer, summarize: #summarize })
        }
        Class::Redundant { summarize } => quote!(#path::Redundant { summarize: #summarize }),
        Class::Effect { idempotent, .. } => quote!(#path::Effect { idempotent: #idempotent }),
        Class::Transcript {
            keep_recent,
            pin_user,
        } => quote!(#path::Transcript { keep_recent: #keep_recent, pin_user: #pin_user }),
        Class::Nested => quote!(),
    }
}

fn schema_field(krate: &syn::Path, field: &Field<'_>) -> TokenStream {
    let Field { name, ty, cfgs, .. } = field;
    if let Class::Nested = field.class {
        let gate = quote!((&&__Gate::<#ty>::NEW));
        return quote! {
            #(#cfgs)*
            let __builder = __builder.nested(
                #name,
                #gate.__nested_schema(),
                #gate.__repeated(),
                #gate.__conditional(),
            );
        };
    }
    let class = class_tokens(krate, &field.class);
    let ty_name = quote!(#ty).to_string().replace(' ', "");
    let scope = match &field.class {
        Class::Effect {
            scope: Some(scope), ..
        } => quote!(.effect_scope(#scope)),
        _ => quote!(),
    };
    quote! {
        #(#cfgs)*
        let __builder = __builder.field(#name, #class, #ty_name)#scope;
    }
}

/// Calls whose only purpose is to fail to compile, at the field, when its type does not fit its
/// class. Each trait carries a `#[diagnostic::on_unimplemented]` message saying what to do.
fn compile_checks(krate: &syn::Path, field: &Field<'_>) -> TokenStream {
    let ty = field.ty;
    let span = ty.span();
    let private = respan(quote!(#krate::__private), span);
    let mut checks = TokenStream::new();
    // The marker struct is named after the field so the message can name it; it sits in its own
    // module so it cannot shadow a path in the field's type. The error points at the field name.
    let name_span = field.member.span();
    let mut marker = field.member.clone();
    marker.set_span(name_span);
    let infer = quote_spanned!(name_span=> _);
    // Whether the type is a conversation, carries state, or is plain, by autoref: a carrier may
    // be neither evicted nor protected whole, and only a conversation may be a `#[transcript]`.
    // `assert` names the check (`assert_evictable`, `assert_protectable`,
    // `assert_transcript_field`).
    let no_state_inside = |assert: &str| {
        let assert = syn::Ident::new(assert, span);
        quote_spanned! {span=>
            {
                #[allow(unused_imports)]
                use #private::{CarriesStateProbe as _, ConversationProbe as _, PlainProbe as _};
                let __verdict = (&&&#private::Probe::<#ty>::new()).verdict();
                mod __field {
                    #[allow(non_camel_case_types, dead_code)]
                    pub struct #marker;
                }
                #private::#assert::<__field::#marker, #ty, #infer>(__verdict);
            }
        }
    };
    match &field.class {
        Class::Protected { .. } => checks.extend(no_state_inside("assert_protectable")),
        Class::Derivable { .. } => checks.extend(no_state_inside("assert_evictable")),
        Class::Redundant { .. } => {
            checks.extend(no_state_inside("assert_evictable"));
            checks.extend(quote_spanned!(span=> #private::assert_redundant_default::<#ty>();));
        }
        Class::Effect { .. } => {
            checks.extend(no_state_inside("assert_effect_field"));
            checks.extend(quote_spanned!(span=> #private::assert_effect_records::<#ty>();));
        }
        Class::Nested => {
            checks.extend(no_state_inside("assert_nested_field"));
            checks.extend(quote_spanned!(span=> #private::assert_nested::<#ty>();));
        }
        Class::Transcript { .. } => checks.extend(no_state_inside("assert_transcript_field")),
    }
    if field.class.allows_summary() {
        checks.extend(quote_spanned!(span=> #private::assert_summarizable::<#ty>();));
    }
    let cfgs = &field.cfgs;
    quote!(#(#cfgs)* { #checks })
}

fn visit_field(krate: &syn::Path, field: &Field<'_>, template: Option<&[Piece]>) -> TokenStream {
    let Field {
        member,
        name,
        ty,
        cfgs,
        ..
    } = field;
    let call = match &field.class {
        Class::Protected { pin } => quote!(__visitor.protected(#name, #pin, &self.#member);),
        Class::Derivable { summarize, .. } => {
            let pushes = template
                .unwrap_or_default()
                .iter()
                .map(|piece| match piece {
                    Piece::Literal(text) => quote!(__out.push_str(#text);),
                    Piece::Field(target) => {
                        let target = syn::Ident::new_raw(target, Span::call_site());
                        quote!(#krate::__private::push_placeholder(__out, &self.#target);)
                    }
                });
            let pointer = quote!(&|__out: &mut ::std::string::String| { #(#pushes)* });
            if *summarize {
                quote! {
                    (&&__Gate::<#ty>::NEW).__derivable_summarizable(
                        __visitor, #name, #pointer, &self.#member,
                    );
                }
            } else {
                quote!(__visitor.derivable(#name, #pointer, &self.#member);)
            }
        }
        Class::Redundant { summarize: true } => quote! {
            (&&__Gate::<#ty>::NEW).__redundant_summarizable(__visitor, #name, &self.#member);
        },
        Class::Redundant { summarize: false } => quote!(__visitor.redundant(#name, &self.#member);),
        Class::Effect { idempotent, .. } => quote! {
            (&&__Gate::<#ty>::NEW).__effect(__visitor, #name, #idempotent, &self.#member);
        },
        Class::Nested => quote! {
            (&&__Gate::<#ty>::NEW).__visit_nested(&self.#member, #name, __visitor);
        },
        Class::Transcript {
            keep_recent,
            pin_user,
        } => quote! {
            (&&__Gate::<#ty>::NEW).__transcript(
                __visitor, #name, #keep_recent, #pin_user, &self.#member,
            );
        },
    };
    quote!(#(#cfgs)* #call)
}

fn rebuild_field(field: &Field<'_>) -> TokenStream {
    let Field {
        member,
        name,
        ty,
        cfgs,
        ..
    } = field;
    let gate = quote!((&&__Gate::<#ty>::NEW));
    let value = match field.class {
        Class::Protected { .. } | Class::Transcript { .. } => quote!(__parts.protected(#name)),
        Class::Derivable { .. } => quote!(#gate.__rebuild_derivable(__parts, #name)),
        Class::Redundant { .. } => quote!(#gate.__rebuild_redundant(__parts, #name)),
        Class::Effect { .. } => quote!(#gate.__rebuild_effect(__parts, #name)),
        Class::Nested => quote!(#gate.__rebuild_nested(__parts, #name)),
    };
    quote!(#(#cfgs)* #member: #value?,)
}
