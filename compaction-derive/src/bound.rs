//! Generic bounds both derives write: a bound only where a field's type mentions a type
//! parameter (concrete field types are checked as they are), plus `'static` for `Compactable`.

use crate::internals::ast::{Class, Container};
use proc_macro2::{TokenStream, TokenTree};
use quote::quote;

/// `Compactable: 'static`, so every type parameter must be too.
pub fn with_static_bounds(mut generics: syn::Generics) -> syn::Generics {
    for param in generics.type_params_mut() {
        param.bounds.push(syn::parse_quote!('static));
    }
    generics
}

/// The `Compactable` impl's generics: `'static` on every type parameter, and for each field
/// whose type mentions one, the bounds its class needs.
pub fn compactable(cont: &Container<'_>) -> syn::Generics {
    let krate = &cont.crate_path;
    let mut generics = with_static_bounds(cont.generics.clone());
    let params = type_params(cont.generics);
    if params.is_empty() {
        return generics;
    }
    let private = quote!(#krate::__private);
    let data = quote!(#private::serde::Serialize + #private::serde::de::DeserializeOwned);
    let where_clause = generics.make_where_clause();
    for field in &cont.fields {
        if !mentions(&params, field.ty) {
            continue;
        }
        let ty = field.ty;
        // A type parameter carries state or not only once it is filled in: the bound proves it
        // plain there, as the autoref check in `visit` does for concrete types.
        let mut bound = match &field.class {
            Class::Protected { .. } | Class::Derivable { .. } => {
                quote!(#data + #private::PlainData)
            }
            Class::Redundant { .. } => {
                quote!(#data + ::core::default::Default + #private::PlainData)
            }
            Class::Transcript { .. } => data.clone(),
            Class::Effect { .. } => quote!(#krate::EffectRecords),
            Class::Nested => quote!(#private::NestedField),
        };
        if field.class.allows_summary() {
            bound.extend(quote!(+ #krate::Summarizable));
        }
        where_clause.predicates.push(syn::parse_quote!(#ty: #bound));
    }
    generics
}

/// The `Summarizable` impl's generics: `Self: Serialize` (the supertrait) and `Summarizable`
/// for each field type that mentions a type parameter.
pub fn summarizable(
    krate: &syn::Path,
    input: &syn::DeriveInput,
    fields: &[&syn::Field],
) -> syn::Generics {
    let mut generics = input.generics.clone();
    let params = type_params(&input.generics);
    if params.is_empty() {
        return generics;
    }
    let ident = &input.ident;
    let (_, ty_generics, _) = input.generics.split_for_impl();
    let self_ty: syn::Type = syn::parse_quote!(#ident #ty_generics);
    let where_clause = generics.make_where_clause();
    where_clause
        .predicates
        .push(syn::parse_quote!(#self_ty: #krate::__private::serde::Serialize));
    for field in fields {
        if mentions(&params, &field.ty) {
            let ty = &field.ty;
            where_clause
                .predicates
                .push(syn::parse_quote!(#ty: #krate::Summarizable));
        }
    }
    generics
}

fn type_params(generics: &syn::Generics) -> Vec<syn::Ident> {
    generics.type_params().map(|p| p.ident.clone()).collect()
}

/// Whether `ty` names one of `params` anywhere inside it.
fn mentions(params: &[syn::Ident], ty: &syn::Type) -> bool {
    fn walk(tokens: TokenStream, params: &[syn::Ident]) -> bool {
        tokens.into_iter().any(|tt| match tt {
            TokenTree::Ident(ident) => params.contains(&ident),
            TokenTree::Group(group) => walk(group.stream(), params),
            _ => false,
        })
    }
    walk(quote!(#ty), params)
}
