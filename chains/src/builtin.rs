//! The chains WalletOps knows without configuration: the main EVM networks, their testnets
//! and the Solana clusters, with their public RPC URLs and confirmation depths.

use walletops_domain::ChainFamily;

/// The confirmations a built-in chain's transactions wait for: a judgement of how deep its
/// blocks are still reorganised in practice, kept short of its full finality so that a
/// status arrives in seconds to minutes.
pub(super) fn default_confirmations(slug: &str) -> u64 {
    match slug {
        // Ethereum since the merge: reorgs past one block are vanishingly rare.
        "ethereum" | "sepolia" => 3,
        // BNB Smart Chain: fast finality in about two blocks.
        "bsc" | "bsc-testnet" => 3,
        // Polygon PoS: milestones finalise within seconds; a few blocks of margin.
        "polygon" | "polygon-amoy" => 5,
        // Rollups order transactions at their sequencer; a local or added chain is trusted
        // at its first block.
        _ => 1,
    }
}

/// What a limited key's writes may pay in network fees a day on a chain, in the native
/// coin's base units, when its owner set no fee budget there: about a hundred ordinary
/// writes at a busy hour's fees. A chain added by configuration gets its family's.
pub(super) fn default_fees_per_day(slug: &str, family: ChainFamily) -> u64 {
    match (family, slug) {
        // 10^17 lamports would be 100 SOL; 0.1 SOL pays thousands of prioritised transfers.
        (ChainFamily::Solana, _) => 100_000_000,
        // 0.05 ETH: ordinary writes at tens of gwei on Ethereum.
        (_, "ethereum" | "sepolia" | "bsc" | "bsc-testnet") => 50_000_000_000_000_000,
        // Polygon's coin is worth less: 1 POL.
        (_, "polygon" | "polygon-amoy") => 1_000_000_000_000_000_000,
        // Rollups and a local or added chain (the playground's anvil): 0.1 ETH.
        _ => 100_000_000_000_000_000,
    }
}

/// slug, family, chain id, name, explorer link template, public RPC URL.
pub(super) type BuiltIn = (
    &'static str,
    ChainFamily,
    i64,
    &'static str,
    &'static str,
    &'static str,
);

pub(super) const BUILT_IN: &[BuiltIn] = {
    use ChainFamily::{Evm, Solana};
    &[
        (
            "ethereum",
            Evm,
            1,
            "Ethereum",
            "https://etherscan.io/tx/{hash}",
            "https://ethereum-rpc.publicnode.com",
        ),
        (
            "sepolia",
            Evm,
            11_155_111,
            "Sepolia",
            "https://sepolia.etherscan.io/tx/{hash}",
            "https://ethereum-sepolia-rpc.publicnode.com",
        ),
        (
            "base",
            Evm,
            8453,
            "Base",
            "https://basescan.org/tx/{hash}",
            "https://mainnet.base.org",
        ),
        (
            "base-sepolia",
            Evm,
            84_532,
            "Base Sepolia",
            "https://sepolia.basescan.org/tx/{hash}",
            "https://sepolia.base.org",
        ),
        (
            "arbitrum",
            Evm,
            42_161,
            "Arbitrum One",
            "https://arbiscan.io/tx/{hash}",
            "https://arb1.arbitrum.io/rpc",
        ),
        (
            "arbitrum-sepolia",
            Evm,
            421_614,
            "Arbitrum Sepolia",
            "https://sepolia.arbiscan.io/tx/{hash}",
            "https://sepolia-rollup.arbitrum.io/rpc",
        ),
        (
            "optimism",
            Evm,
            10,
            "OP Mainnet",
            "https://optimistic.etherscan.io/tx/{hash}",
            "https://mainnet.optimism.io",
        ),
        (
            "optimism-sepolia",
            Evm,
            11_155_420,
            "OP Sepolia",
            "https://sepolia-optimism.etherscan.io/tx/{hash}",
            "https://sepolia.optimism.io",
        ),
        (
            "polygon",
            Evm,
            137,
            "Polygon",
            "https://polygonscan.com/tx/{hash}",
            "https://polygon-rpc.com",
        ),
        (
            "polygon-amoy",
            Evm,
            80_002,
            "Polygon Amoy",
            "https://amoy.polygonscan.com/tx/{hash}",
            "https://rpc-amoy.polygon.technology",
        ),
        (
            "bsc",
            Evm,
            56,
            "BNB Smart Chain",
            "https://bscscan.com/tx/{hash}",
            "https://bsc-dataseed.bnbchain.org",
        ),
        (
            "bsc-testnet",
            Evm,
            97,
            "BNB Smart Chain Testnet",
            "https://testnet.bscscan.com/tx/{hash}",
            "https://data-seed-prebsc-1-s1.bnbchain.org:8545",
        ),
        (
            "solana",
            Solana,
            0,
            "Solana",
            "https://explorer.solana.com/tx/{hash}",
            "https://api.mainnet-beta.solana.com",
        ),
        (
            "solana-devnet",
            Solana,
            -3,
            "Solana Devnet",
            "https://explorer.solana.com/tx/{hash}?cluster=devnet",
            "https://api.devnet.solana.com",
        ),
        (
            "solana-testnet",
            Solana,
            -2,
            "Solana Testnet",
            "https://explorer.solana.com/tx/{hash}?cluster=testnet",
            "https://api.testnet.solana.com",
        ),
    ]
};
