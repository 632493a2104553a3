"""Numbers quoted from the papers, shown beside ours."""

# 003 Table 1 (ArXiv, L_tr = 512): perplexity vs L_ex for the three ALiBi-slope experiments.
PAPER_003_TABLE1 = {
    "source": "Chi et al. 2023 (003), Table 1, ArXiv, L_tr = 512",
    "train_length": 512,
    "lengths": [512, 1024, 2048, 4096, 8192],
    "groups": [
        {
            "group": "shift",
            "title": "Shift all h by Δ",
            "labels": ["Δ=-3", "Δ=0", "Δ=2", "Δ=4", "Δ=6", "Δ=8"],
            "ppl": [
                [5.76, 5.57, 5.50, 5.63, 5.70, 5.70],
                [7.15, 5.64, 5.31, 5.81, 55.4, 55.4],
                [7.15, 5.94, 5.89, 6.92, 94.4, 94.4],
                [7.15, 5.95, 5.92, 6.94, 96.0, 96.0],
                [7.15, 5.95, 5.92, 6.94, 96.0, 96.0],
            ],
        },
        {
            "group": "same-h",
            "title": "Same h for all heads",
            "labels": ["h=0", "h=2", "h=4", "h=6", "h=8"],
            "ppl": [
                [9.45, 6.65, 5.85, 5.60, 5.70],
                [9.20, 7.01, 8.66, 25.4, 55.4],
                [9.21, 7.08, 8.66, 31.7, 94.4],
                [9.21, 7.08, 8.66, 31.8, 96.0],
                [9.21, 7.08, 8.66, 31.8, 96.0],
            ],
        },
        {
            "group": "window",
            "title": "Windowed attention with size w",
            "labels": ["w=40", "w=80", "w=100", "w=120", "w=160", "w=320"],
            "ppl": [
                [8.27, 7.28, 7.04, 6.77, 6.41, 6.04],
                [8.27, 7.29, 7.02, 8.90, 67.4, 178],
                [8.27, 7.29, 7.03, 8.90, 67.5, 202],
                [8.27, 7.29, 7.02, 8.90, 67.5, 202],
                [8.27, 7.29, 7.02, 8.90, 67.5, 202],
            ],
        },
    ],
}

# 004 Table 5 (Flan-T5-XL, L_tr = 512; the paper's column labels); topic's first P_max entry is blank in the source
PAPER_004_TABLE5 = {
    "passkey": {
        "labels": ["20k", "30k", "40k", "50k", "55k"],
        "unit": "sentences",
        "rows": [("w/ P_max", [0.85, 0.8, 0.75, 0.75, 0.75]), ("w/ H", [0.7, 0.65, 0.6, 0.6, 0.6])],
    },
    "line": {
        "labels": ["200", "300", "400", "500", "600", "680"],
        "unit": "lines",
        "rows": [("w/ P_max", [0.8, 0.75, 0.75, 0.7, 0.7, 0.7]), ("w/ H", [0.6, 0.55, 0.55, 0.5, 0.5, 0.5])],
    },
    "topic": {
        "labels": ["5", "10", "15", "20", "25"],
        "unit": "topics",
        "rows": [("w/ P_max", [None, 0.75, 0.7, 0.65, 0.65]), ("w/ H", [0.7, 0.55, 0.55, 0.5, 0.5])],
    },
}
