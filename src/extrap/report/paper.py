"""Numbers quoted from the papers, shown beside ours."""

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
