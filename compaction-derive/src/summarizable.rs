//! `#[derive(Summarizable)]`: plain data whose every field is itself summarizable.

use crate::bound;
use crate::internals::attr::{self, CLASS_NAMES};
use crate::internals::ctxt::Ctxt;
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

pub fn derive(input: &syn::DeriveInput) -> TokenStream {
    let cx = Ctxt::new();
    let krate = attr::crate_path(&cx, input);
    let fields: Vec<&syn::Field> = match &input.data {
        syn::Data::Struct(s) => s.fields.iter().collect(),
        syn::Data::Enum(e) => e.variants.iter().flat_map(|v| v.fields.iter()).collect(),
        syn::Data::Union(u) => {
            cx.syn_error(syn::Error::new(
                u.union_token.span,
                "#[derive(Summarizable)] does not support unions",
            ));
            Vec::new()
        }
    };
    for field in &fields {
        for attr in &field.attrs {
            if let Some(name) = CLASS_NAMES.iter().find(|n| attr.path().is_ident(n)) {
                cx.error_spanned_by(
                    attr,
                    format!(
                        "a type with #[{name}] fields carries state that must never be \
                         summarized; remove #[derive(Summarizable)] from `{}`",
                        input.ident
                    ),
                );
            }
        }
    }
    let errors = cx.check().err().map(|e| e.to_compile_error());
    if errors.is_some() && matches!(input.data, syn::Data::Union(_)) {
        return quote!(#errors);
    }
    let ident = &input.ident;
    let generics = bound::summarizable(&krate, input, &fields);
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    let checks = fields.iter().map(|f| {
        let ty = &f.ty;
        quote_spanned!(ty.span()=> #krate::__private::assert_summarizable::<#ty>();)
    });
    // On error the impl is still written, so the use sites stay quiet: the build fails anyway.
    quote! {
        #errors

        #[automatically_derived]
        impl #impl_generics #krate::Summarizable for #ident #ty_generics #where_clause {
            // The default source (the value's JSON): the engine need not compare it.
            fn summary_source_is_json(&self) -> bool {
                true
            }
        }

        // Summarizable data never carries state, so a generic field may hold it.
        #[automatically_derived]
        impl #impl_generics #krate::__private::PlainData for #ident #ty_generics #where_clause {}

        const _: () = {
            #[allow(dead_code)]
            fn __summarizable_fields #impl_generics () #where_clause {
                #(#checks)*
            }
        };
    }
}
